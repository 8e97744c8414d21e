"""Pairs: the pairs browser and the pair page, curators' actions on chosen pairs (``actions``)
and their writes (``services``: gold pairs, priority, restriction), and reading pairs
(``selectors``); imports core, models, agreement and decisions."""
