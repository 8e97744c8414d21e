"""Pairs: the one owner of Pair.status and Pair.target_votes (lifecycle), the pairs browser and
the pair page, and curators' actions on chosen pairs; imports core, models, agreement, projects
and queue."""
