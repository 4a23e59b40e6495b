"""User files as text and as syntax trees: reading and writing them safely (`source`),
walking a tree (`walk`), line and column positions of reported nodes (`positions`), and
the one place that touches libcst's private API (`libcst_compat`)."""
