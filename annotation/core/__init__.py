"""The shared kernel of both apps: what every feature leans on; it imports no feature."""
