"""Media bytes served to a project's members (the served copy, with range requests); imports core,
models and imports (metadata stripping)."""
