"""The console's panes (one per tab) and its modal dialog."""
