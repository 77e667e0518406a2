"""The qa stage's second source beside synthesis (:mod:`searchlab.synth`): labeled question files of the field
(:mod:`.questions`, read with :mod:`searchlab.questions.formats`) and the demonstrations made by searching them
(:mod:`.demos`). Its face imports nothing.
"""
