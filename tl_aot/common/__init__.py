"""What every wing shares: errors, files, spelling, the metadata dataclasses, versions."""
