"""What the instructor's sources generate: the student stubs, the release, and the rubric's numbers in the docs."""
