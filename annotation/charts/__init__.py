"""Server-side SVG charts, each with the table of its numbers; imports core.scales (the kappa
threshold), nothing else."""
