"""Interview practice sessions on the cards of :mod:`ringlab.check.cards`: drawn numbers, typed answers
checked with units (:mod:`.units`), a clock, hints, a rubric, and a local record (:mod:`.state`).
Run by ``ringlab practice --session`` / ``--mock N`` (:mod:`ringlab.commands.practice`)."""
