"""Audio helpers, sans-IO: WAV decoding and encoding (``wav``) and transcript
rendering in OpenAI's response formats (``subtitles``)."""
