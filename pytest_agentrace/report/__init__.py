"""Reports over outcomes: terminal text (tabulate), and later Markdown, JSON and HTML."""
