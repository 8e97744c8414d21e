"""Server-side SVG charts, each with the table of its numbers; imports core and agreement (the
kappa threshold), nothing else."""
