"""Where results go and how they come back: local trial records (authoritative), the copy in
the study database shared by every machine, the MLflow mirror, and the results frames.
"""
