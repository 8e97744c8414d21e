"""The projects' pages: the home and overview pages and the settings page."""
