"""One module per study: its profiles, parameter checks, run plan and analysis.

A notebook holds the parameters and the narrative; the study module turns parameters into checked
settings (before any compute), settings into run configs, and collected records into tables.
"""
