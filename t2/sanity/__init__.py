"""The sanity suite (report 002): every component combination learns the toy tasks."""
