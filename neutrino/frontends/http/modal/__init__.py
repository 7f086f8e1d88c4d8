"""The modality routes: embeddings and rerank, audio (transcription, translation, speech),
detection.
"""
