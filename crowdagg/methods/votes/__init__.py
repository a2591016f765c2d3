"""Vote-based methods: majority vote (:mod:`.mv`), weighted (:mod:`.wmv`), worker agreement (:mod:`.wawa`)."""
