"""Dawid--Skene EM and its one-coin variant (:mod:`.ds`)."""
