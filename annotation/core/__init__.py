"""The shared kernel: domain errors, access helpers, the broker seam and the job lifecycle,
limits, prepared statements, content ids and content as it is shown, search words, Markdown,
request middleware, navigation, the section registries, JSON input, ranged downloads, CSV,
rating scales, the claim key; imports annotation.models only, never a feature package."""
