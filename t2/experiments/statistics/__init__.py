"""Statistics: intervals over seeds and sentences, sacreBLEU's paired tests, looks, spreads."""
