"""The words that are everywhere in speech.

A run of these alone is what the speaker said, whatever it sounds like (a
term is not heard as "for"; term_spelling.py), and a decode that shares only
these with its prompt did not copy it (prompt_text.py).
"""

from __future__ import annotations

FUNCTION_WORDS = frozenset("""
a an the and or but if of to in on at by for with from as is are was were be been am do does did have has had
i you he she it we they me him her us them my your his its our their this that these those there here what who
how why when where which not no yes so too very can could will would shall should may might must just then than
all any some one two up down out off over into onto about after before again once more most much many such own
same only well oh ok okay let lets get got go going gone come came say said see saw know knew make made take
took way new old now also even ever never still yet
""".split())
