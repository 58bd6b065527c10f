package option

import (
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald/lang/ast"
)

// The checks of the table, one an option: each decodes its option's value into the Set
// for the decoder's mode, or says why the value cannot be taken.

func decodeMode(d *decoder, o *ast.WatchOption) *Error {
	if d.mode == Watch && word(o.Value) != "watch" {
		return invalid(o.Pos(), "this is a watch-mode stream")
	}
	return nil // consume mode checks the statement's mode once every option is read
}

func decodeGroup(d *decoder, o *ast.WatchOption) *Error {
	if lit, ok := o.Value.(*ast.BasicLit); ok {
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return &Error{Pos: lit.Pos(), Kind: Syntax, Msg: "bad string literal " + lit.Value}
		}
		d.set.Group = s
	}
	return nil
}

func decodeOrdering(d *decoder, o *ast.WatchOption) *Error {
	switch x := o.Value.(type) {
	case *ast.Ident:
		d.set.Ordering = word(x)
	case *ast.OrderingExpr:
		d.set.Ordering, d.set.OrderKeys = "attribute", x.Keys
	}
	return nil
}

func decodeDelivery(d *decoder, o *ast.WatchOption) *Error {
	d.set.Reliable = word(o.Value) == "reliable"
	return nil
}

func decodeVisibility(d *decoder, o *ast.WatchOption) *Error {
	d.set.Immediate = word(o.Value) == "immediate"
	return nil
}

func decodeDeliverOn(d *decoder, o *ast.WatchOption) *Error {
	d.set.PerTick = word(o.Value) == "tick"
	return nil
}

func decodeWindow(d *decoder, o *ast.WatchOption) *Error {
	if d.mode == Consume {
		if word(o.Value) != "none" {
			return invalid(o.Value.Pos(), "windows apply to watch mode, not consume mode")
		}
		return nil
	}
	call, ok := o.Value.(*ast.CallExpr)
	if !ok {
		return nil // none
	}
	var sizes []time.Duration
	for _, a := range call.Args {
		v, err := durationOf(a)
		if err != nil {
			return err
		}
		if v <= 0 {
			return invalid(a.Pos(), "window sizes are positive durations")
		}
		sizes = append(sizes, v)
	}
	d.set.WinSize, d.set.WinSlide = sizes[0], sizes[0]
	if len(sizes) == 2 {
		d.set.WinSlide = sizes[1]
	}
	return nil
}

func decodeBuffer(d *decoder, o *ast.WatchOption) *Error {
	n, err := intOf(o.Value)
	if err != nil {
		return err
	}
	if n < 1 {
		return invalid(o.Value.Pos(), "buffer must be at least 1")
	}
	d.set.Buffer = int(n)
	return nil
}

func decodeOnFull(d *decoder, o *ast.WatchOption) *Error {
	w := word(o.Value)
	if d.mode == Consume && w != "block" {
		return invalid(o.Value.Pos(), "consume mode never drops or fails deliveries; on_full must be block (it stops delivering to a full consumer)")
	}
	d.set.OnFull = w
	return nil
}

func decodeAckTimeout(d *decoder, o *ast.WatchOption) *Error {
	v, err := durationOf(o.Value)
	if err != nil {
		return err
	}
	if v <= 0 {
		return invalid(o.Value.Pos(), "ack_timeout must be a positive duration")
	}
	d.set.AckTimeout = v
	return nil
}

func decodeMaxRedeliveries(d *decoder, o *ast.WatchOption) *Error {
	n, err := intOf(o.Value)
	if err != nil {
		return err
	}
	if n < 0 {
		return invalid(o.Value.Pos(), "max_redeliveries must not be negative")
	}
	d.set.MaxRedeliveries = int(n)
	return nil
}

func decodeMaxInFlight(d *decoder, o *ast.WatchOption) *Error {
	n, err := intOf(o.Value)
	if err != nil {
		return err
	}
	if n < 1 {
		return invalid(o.Value.Pos(), "max_in_flight must be at least 1")
	}
	d.maxInFlight = int(n)
	return nil
}

func decodeDeadLetter(d *decoder, o *ast.WatchOption) *Error {
	if ref, ok := o.Value.(*ast.NodeRef); ok {
		d.set.DeadLetter = ref.Name
	}
	return nil
}

func decodeInitial(d *decoder, o *ast.WatchOption) *Error {
	switch x := o.Value.(type) {
	case *ast.Ident:
		d.set.Initial = word(x)
	case *ast.CallExpr:
		if d.mode == Consume {
			return invalid(x.Pos(), "initial: since(n) replays the change log and applies to watch mode; consume mode takes full or none")
		}
		n, err := intOf(x.Args[0])
		if err != nil {
			return err
		}
		if n < 0 {
			return invalid(x.Pos(), "since(n) needs a tick, a non-negative Int")
		}
		d.set.Initial, d.set.Since = "since", uint64(n)
	}
	return nil
}

func decodeHeartbeat(d *decoder, o *ast.WatchOption) *Error {
	v, err := durationOf(o.Value)
	if err != nil {
		return err
	}
	if v <= 0 {
		return invalid(o.Value.Pos(), "heartbeat needs a positive duration")
	}
	d.set.Heartbeat = v
	return nil
}

func decodeBackoff(d *decoder, o *ast.WatchOption) *Error {
	call, ok := o.Value.(*ast.CallExpr)
	if !ok {
		d.set.Backoff = Backoff{} // none
		return nil
	}
	var args []float64
	for i, a := range call.Args {
		if strings.EqualFold(call.Fun.Name, "exponential") && i == 1 {
			f, err := numberOf(a)
			if err != nil {
				return err
			}
			args = append(args, f)
			continue
		}
		v, err := durationOf(a)
		if err != nil {
			return err
		}
		args = append(args, float64(v))
	}
	switch strings.ToLower(call.Fun.Name) {
	case "fixed":
		d.set.Backoff = Backoff{Initial: time.Duration(args[0]), Factor: 1}
	case "exponential":
		b := Backoff{Initial: time.Duration(args[0]), Factor: args[1], Max: time.Duration(args[2])}
		if b.Factor < 1 {
			return invalid(call.Pos(), "the backoff factor must be at least 1")
		}
		d.set.Backoff = b
	default:
		return invalid(call.Pos(), "unknown backoff %s", call.Fun.Name)
	}
	return nil
}

func decodeFilter(d *decoder, o *ast.WatchOption) *Error {
	d.set.Filter = o.Value
	return nil
}

func decodeFairness(d *decoder, o *ast.WatchOption) *Error {
	d.set.Fairness = o.Value
	return nil
}

func decodeWeight(d *decoder, o *ast.WatchOption) *Error {
	d.set.Weight = o.Value
	return nil
}

func decodeAvailableAt(d *decoder, o *ast.WatchOption) *Error {
	d.set.AvailableAt = o.Value
	return nil
}

func unsupported(_ *decoder, o *ast.WatchOption) *Error {
	return &Error{Pos: o.Pos(), Kind: Unsupported, Msg: "branches are not supported"}
}
