"""Projects and their members: creating and changing a project, its members and settings
(services), the home, overview and settings pages and the projects API; imports core, models,
accounts, decisions, pairs and queue."""
