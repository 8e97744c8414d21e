"""Server-side SVG charts, each with the table of its numbers; imports agreement.statistics (the
kappa threshold), nothing else."""
