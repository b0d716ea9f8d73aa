"""The real-voice corpus: credited human recordings from Debian packages (asterisk prompts, Tux Paint
stamp descriptions), 16 kHz, transcribed, with a card of names, licences and credit lines.
"""
