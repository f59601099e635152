"""The single source: course_lib -> solutions/ -> answer keys -> exercises/ -> student editions.

- :mod:`.sync`: answer cells and hidden cells of ``solutions/`` from course_lib, the answer keys, the drift check;
- :mod:`.answer_keys`: every graded cell's cases and expected outcomes (``answer_keys/*.key``), and tolerances;
- :mod:`.cases`: the hidden cases' generators, gradients, properties and hints, one module per problem set;
- :mod:`.plain_values`: the plain-data form in which values leave the sandbox and enter the keys;
- :mod:`.release`: ``exercises/`` from ``solutions/`` with nbgrader;
- :mod:`.edition`, :mod:`.wheels`: student edition N of course_lib and its wheel;
- :mod:`.leaks`: solution text where students can read it;
- :mod:`.measure`, :mod:`.stated_results`, :mod:`.scoring`: the results and the scoring each page states.
"""
