"""The queue's pages: the annotators' workbench and the curators' queue page."""
