"""The assignment's rule and evidence of tampering: the static scan for library attention, a notebook's kernel evidence."""
