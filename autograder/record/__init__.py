"""A grade as data: the Grade record, its points, its results files and the review decisions kept with them.

Pure functions and the one reader and writer of results.json and grades.csv (results.py); nothing
here runs student code or a test.
"""
