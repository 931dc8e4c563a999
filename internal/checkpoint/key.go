package checkpoint

import (
	"fmt"
	"strings"
)

// MaxKeyLength is the longest key accepted, in bytes. It leaves room in a
// 255-byte file name for the temporary and quarantine suffixes.
const MaxKeyLength = 200

// quarantineMarker marks files which are not checkpoints but corrupt ones moved
// aside. Keys may not contain it, nor start with "." as the temporary files of
// atomicfile do, so neither kind can be mistaken for a key.
const quarantineMarker = ".corrupt-"

// ValidateKey returns an error matching ErrInvalidKey unless key can be used
// as a file name directly inside the store's directory: 1 to MaxKeyLength
// bytes of ASCII letters, digits, '.', '_' and '-', not starting with '.'
// (which also excludes "." and ".."), and not containing ".corrupt-".
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return fmt.Errorf("%w: %d bytes long, more than %d", ErrInvalidKey, len(key), MaxKeyLength)
	case key[0] == '.':
		return fmt.Errorf("%w: %q starts with '.'", ErrInvalidKey, key)
	case strings.Contains(key, quarantineMarker):
		return fmt.Errorf("%w: %q contains %q", ErrInvalidKey, key, quarantineMarker)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has byte %q at offset %d; allowed are letters, digits, '.', '_' and '-'", ErrInvalidKey, key, c, i)
		}
	}
	return nil
}
