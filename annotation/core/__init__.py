"""The shared kernel: domain errors, access helpers, the broker seam and the job lifecycle,
limits, prepared statements, content ids, search words, Markdown, request middleware,
navigation, the section registries, JSON input, ranged downloads, CSV, rating scales; imports
annotation.models only, never a feature package."""
