"""Writes for judges: judges themselves (``judges``), filter runs (``runs``) and the ensemble
rule runs apply (``ensemble``)."""
