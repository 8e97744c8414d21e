"""The agreement pages: the Agreement page and the adjudication queue."""
