"""The queue's services, one module per job: the claim (``claim``), leases once taken
(``leases``), votes (``votes``), skips (``skips``) and undo (``undo``) on the annotator's path,
and the curators' levers on the queue (``levers``)."""
