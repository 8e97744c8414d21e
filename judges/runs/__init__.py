"""Filter runs: judges voting on pairs as Celery batches, the ensemble deciding each pair, progress
and the pair page's verdicts; imports roster and the kernel."""
