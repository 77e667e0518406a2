"""Questions, low in the house: the record every reader returns (:mod:`.record`), the field's file formats and
their readers (:mod:`.formats`), and the question-file entry of the params (:mod:`.config`). Synthesis, the import
of labeled files (:mod:`searchlab.labeled`), training and evaluation read questions through it; it imports none of
them, and its face imports nothing.
"""
