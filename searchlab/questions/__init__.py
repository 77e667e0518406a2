"""Questions, low in the house: the record every reader returns (:mod:`.record`), the field's file formats and
their readers (:mod:`.formats`), the import of labeled files as the qa stage's training questions (:mod:`.files`),
and the question-file entry of the params (:mod:`.config`). Synthesis, training and evaluation read questions from
here; this package imports none of them, and its face imports nothing.
"""
