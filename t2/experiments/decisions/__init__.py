"""Decisions: the rule, each arm's verdict, the plan recorded before the first run, power."""
