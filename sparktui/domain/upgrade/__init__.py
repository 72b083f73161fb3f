"""``sparktui upgrade IMAGE``'s checking and deciding parts (pure; no I/O): what a vLLM build accepts
(``serve_help``), which of the recipe's flags it lacks (``flag_check``), promote or roll back (``verdict``),
and the record of images with the "image in use" override (``images``)."""
