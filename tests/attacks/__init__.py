"""Attacks as the issues describe them: each test attacks, and the fix holds."""
