package runner

import (
	"context"
	"errors"
	"fmt"
)

// canceled marks err as ErrCanceled when ctx was canceled (Ctrl-C), so that
// the message says nothing was committed and the exit code is 1. It is only
// for errors returned before COMMIT succeeded.
func canceled(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ErrCanceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCanceled, err)
}
