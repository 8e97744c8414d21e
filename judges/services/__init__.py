"""Writes for judges: filter runs (``runs``) and the ensemble rule they apply (``ensemble``)."""
