"""Pairs: the pairs browser and the pair page, and curators' actions on chosen pairs; imports
core, models, agreement, decisions, projects and queue."""
