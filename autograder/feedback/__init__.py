"""What a student reads beyond pass and fail: the likely misconception behind a failed part, and `check`'s table."""
