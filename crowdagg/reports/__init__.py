"""What is computed from results and answers for people to read: evaluation against the truth (:mod:`.evaluate`)."""
