package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/internal/tracing"
)

// Publishing goes over one stream per client (the Publish RPC). Publishes queue up while
// a frame is on its way, and the next frame carries every one of them; the server
// commits a frame's messages together and acknowledges each once durable. So many
// goroutines publishing at once cost a few frames and commits, not one request each.

// maxPublishFrame bounds the messages of one frame.
const maxPublishFrame = 1000

// PublishFuture is the outcome of a publish: Wait for it, or select on Done.
type PublishFuture struct {
	done chan struct{}
	id   string
	seq  uint64
	err  error
	span trace.Span // the publish's producer span, ended with it
}

// Done is closed once the publish is acknowledged (durable) or failed.
func (f *PublishFuture) Done() <-chan struct{} { return f.done }

// Wait returns the new node's id once the server has made it durable, or why the
// publish failed. If ctx ends first Wait returns ctx's error, but the publish itself
// goes on and may still succeed.
func (f *PublishFuture) Wait(ctx context.Context) (string, error) {
	select {
	case <-f.done:
		return f.id, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Result returns the outcome once Done is closed: the id, the position (seq) of the
// commit that created the node, or the error.
func (f *PublishFuture) Result() (id string, seq uint64, err error) {
	<-f.done
	return f.id, f.seq, f.err
}

func (f *PublishFuture) finish(id string, seq uint64, err error) {
	f.id, f.seq, f.err = id, seq, err
	if f.span != nil {
		tracing.EndPublish(f.span, id, seq, err)
	}
	close(f.done)
}

func failedFuture(err error) *PublishFuture {
	f := &PublishFuture{done: make(chan struct{})}
	f.finish("", 0, err)
	return f
}

// PublishAsync queues a publish (see Publish) and returns at once: the future reports
// its outcome. Publishes of one client keep their order: they are committed in the
// order they were queued. InSession is not available here; use Publish. WithContext
// gives it the trace to join.
func (c *Client) PublishAsync(typ string, body any, opts ...PublishOption) *PublishFuture {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.session != nil {
		return failedFuture(invalid("PublishAsync cannot publish in a session; use Publish"))
	}
	return c.publishAsync(typ, body, &o)
}

// publishAsync queues a publish within a producer span, the child of o.ctx's span, and
// stores the span's trace context with the message (AttrTrace).
func (c *Client) publishAsync(typ string, body any, o *publishOptions) *PublishFuture {
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	span, traceparent := tracing.StartPublish(ctx, c.trc, typ)
	attrs, err := c.attrsOf(body, o)
	if err != nil {
		tracing.EndPublish(span, "", 0, err)
		return failedFuture(err)
	}
	pub, err := newPublication(typ, attrs, o.id)
	if err != nil {
		tracing.EndPublish(span, "", 0, err)
		return failedFuture(err)
	}
	pub.setTrace(traceparent)
	if c.isClosed() {
		tracing.EndPublish(span, "", 0, ErrClosed)
		return failedFuture(ErrClosed)
	}
	return c.pub.submit(pub, span)
}

// publication is one publish as the sender turns it into a wire message: the form of
// its attributes depends on the stream it goes out on.
type publication struct {
	typ, id string
	attrs   herald.Attrs // sorted by name; nulls are kept, as the map form sends them
	// hasNull keeps the message in the map form: the binary encoding leaves nulls out,
	// and the server refuses a null attribute that a type does not declare.
	hasNull bool
}

// newPublication checks the names of a publish and converts its attribute values.
func newPublication(typ string, attrs map[string]any, id string) (publication, error) {
	if !isIdent(typ) {
		return publication{}, invalid("publish: type %q is not an identifier", typ)
	}
	if id != "" && !isIdent(id) {
		return publication{}, invalid("publish: id %q must be letters, digits and _", id)
	}
	// In name order, so that of several bad attributes the same one is reported: the
	// names are sorted first, then the values converted in place.
	pub := publication{typ: typ, id: id, attrs: make(herald.Attrs, 0, len(attrs))}
	for name := range attrs {
		pub.attrs = append(pub.attrs, herald.Attr{Name: name})
	}
	slices.SortFunc(pub.attrs, func(a, b herald.Attr) int { return strings.Compare(a.Name, b.Name) })
	for i := range pub.attrs {
		a := &pub.attrs[i]
		if !isIdent(a.Name) {
			return publication{}, invalid("publish: attribute %q is not an identifier", a.Name)
		}
		v, err := herald.ValueOf(attrs[a.Name])
		if err != nil {
			return publication{}, &herald.Error{Code: herald.CodeInvalidArgument, Message: fmt.Sprintf("client: publish: attribute %s: %v", a.Name, err), Err: err}
		}
		a.Value = v
		pub.hasNull = pub.hasNull || v.IsNull()
	}
	return pub, nil
}

// setTrace stores traceparent with the message as the attribute AttrTrace, unless it
// is empty or the publish sets that attribute itself.
func (pub *publication) setTrace(traceparent string) {
	if traceparent == "" {
		return
	}
	i, found := slices.BinarySearchFunc(pub.attrs, herald.AttrTrace, func(a herald.Attr, name string) int { return strings.Compare(a.Name, name) })
	if found {
		return
	}
	pub.attrs = slices.Insert(pub.attrs, i, herald.Attr{Name: herald.AttrTrace, Value: herald.String(traceparent)})
}

// wire builds the message of pub under ref. With binary set (the server reads
// attrs_binary) its attributes are appended to buf, which the message then shares.
func (pub publication) wire(ref uint64, binary bool, buf []byte) (*heraldv1.PublishMessage, []byte) {
	msg := &heraldv1.PublishMessage{Ref: ref, Type: pub.typ, Id: pub.id}
	if binary && !pub.hasNull {
		start := len(buf)
		buf = pub.attrs.AppendBinary(buf)
		msg.AttrsBinary = buf[start:len(buf):len(buf)]
		return msg, buf
	}
	msg.Attrs = make(map[string]*heraldv1.Value, len(pub.attrs))
	for _, a := range pub.attrs {
		msg.Attrs[a.Name] = convert.ToWire(a.Value)
	}
	return msg, buf
}

type pubItem struct {
	pub   publication
	first time.Time     // when a node first refused it; zero until then
	ref   uint64        // its reference on the stream it was last sent on
	fut   PublishFuture // one allocation with the item
}

// pubStream is one open Publish call.
type pubStream struct {
	ep       *endpoint
	call     *connect.BidiStreamForClient[heraldv1.PublishRequest, heraldv1.PublishResponse]
	cancel   context.CancelFunc
	inflight map[uint64]*pubItem // sent, waiting for their acknowledgement
	binary   bool                // the server's headers said it reads attrs_binary
}

// publisher is a client's publish stream and its queue. Its goroutines — a sender while
// there is something to send, a receiver while a stream is open — are waited for by
// close.
type publisher struct {
	c *Client

	mu      sync.Mutex
	queue   []*pubItem
	stream  *pubStream
	nextRef uint64
	refused int // streams refused in a row (the next waits failoverBackoff)
	sending bool
	closed  bool
	wg      sync.WaitGroup
}

func (p *publisher) submit(pub publication, span trace.Span) *PublishFuture {
	it := &pubItem{pub: pub, fut: PublishFuture{done: make(chan struct{}), span: span}}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		it.fut.finish("", 0, ErrClosed)
		return &it.fut
	}
	p.queue = append(p.queue, it)
	if !p.sending {
		p.sending = true
		p.wg.Add(1)
		go p.send()
	}
	p.mu.Unlock()
	return &it.fut
}

// send writes frames of what is queued until the queue is empty.
func (p *publisher) send() {
	defer p.wg.Done()
	for {
		gather(&p.mu, maxPublishFrame, func() (bool, int) {
			return p.stream != nil && len(p.stream.inflight) > 0, len(p.queue)
		})
		p.mu.Lock()
		n := min(len(p.queue), maxPublishFrame)
		if n == 0 || p.closed {
			p.sending = false
			p.mu.Unlock()
			return
		}
		if p.stream == nil && p.refused > 0 {
			// The last node refused the stream: give the cluster a moment.
			d := failoverBackoff(p.refused - 1)
			p.mu.Unlock()
			p.c.tr.sleep(context.Background(), d)
			p.mu.Lock()
			if p.closed {
				p.sending = false
				p.mu.Unlock()
				return
			}
			n = min(len(p.queue), maxPublishFrame)
		}
		frame := p.queue[:n:n]
		p.queue = p.queue[n:]
		st, err := p.openLocked()
		if err != nil {
			p.mu.Unlock()
			for _, it := range frame {
				it.fut.finish("", 0, err)
			}
			continue
		}
		first := p.nextRef + 1
		for _, it := range frame {
			p.nextRef++
			it.ref = p.nextRef
			st.inflight[p.nextRef] = it
		}
		binary := st.binary
		p.mu.Unlock()
		req := &heraldv1.PublishRequest{Messages: make([]*heraldv1.PublishMessage, n)}
		var buf []byte
		if binary {
			size := 0
			for _, it := range frame {
				size += it.pub.attrs.EncodedLen()
			}
			buf = make([]byte, 0, size) // one array for the frame: no slice outgrows it
		}
		for i, it := range frame {
			req.Messages[i], buf = it.pub.wire(first+uint64(i), binary, buf)
		}
		if err := st.call.Send(req); err != nil {
			// The receiver sees the broken stream too and fails what is in flight.
			p.broken(st, fromConnect(err))
		}
	}
}

// openLocked returns the open stream, opening one (and its receiver) when there is none.
func (p *publisher) openLocked() (*pubStream, error) {
	if p.stream != nil {
		return p.stream, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	ep := p.c.tr.ep()
	call := ep.rpc.Publish(ctx)
	st := &pubStream{ep: ep, call: call, cancel: cancel, inflight: map[uint64]*pubItem{}}
	p.stream = st
	p.wg.Add(1)
	go p.receive(st)
	return st, nil
}

// receive completes futures with the server's acknowledgements until the stream ends.
func (p *publisher) receive(st *pubStream) {
	defer p.wg.Done()
	for {
		resp, err := st.call.Receive()
		if err != nil {
			p.broken(st, fromConnect(err))
			return
		}
		binary := st.call.ResponseHeader().Get(convert.HeaderBinaryAttrs) == "1"
		p.mu.Lock()
		st.binary = binary
		type outcome struct {
			it  *pubItem
			id  string
			seq uint64
			err error
		}
		done := make([]outcome, 0, len(resp.GetAcks()))
		for _, a := range resp.GetAcks() {
			it := st.inflight[a.GetRef()]
			if it == nil {
				continue
			}
			delete(st.inflight, a.GetRef())
			if e := a.GetError(); e != nil {
				done = append(done, outcome{it: it, err: detailError(e)})
				continue
			}
			done = append(done, outcome{it: it, id: a.GetId(), seq: a.GetSeq()})
			p.refused = 0
		}
		p.mu.Unlock()
		for _, o := range done {
			o.it.fut.finish(o.id, o.seq, o.err)
		}
	}
}

// broken fails everything in flight on st and forgets it; the next publish opens a new
// stream.
func (p *publisher) broken(st *pubStream, err error) {
	if err == nil {
		err = errors.New("client: the publish stream ended")
	}
	// A stream the node refused (it does not lead, or it is stopping) or that never
	// reached it carried nothing out: the server answers every frame it took before it
	// ends the stream with an error, so what is left was not committed and goes out
	// again, to the node the refusal names, for as long as the failover timeout allows.
	again := false
	if retry, _ := p.c.tr.moved(context.Background(), st.ep, err, false); retry {
		again = true
	}
	now := p.c.tr.clock.Now()
	p.mu.Lock()
	if p.stream == st {
		p.stream = nil
	}
	left := st.inflight
	st.inflight = map[uint64]*pubItem{}
	closed := p.closed
	var retried []*pubItem
	if again && !closed {
		for ref, it := range left {
			if it.first.IsZero() {
				it.first = now
			}
			if now.Sub(it.first) <= p.c.tr.failover {
				retried = append(retried, it)
				delete(left, ref)
			}
		}
		slices.SortFunc(retried, func(a, b *pubItem) int { return cmp.Compare(a.ref, b.ref) })
		p.queue = append(retried, p.queue...)
		if len(retried) > 0 {
			p.refused++
			if !p.sending {
				p.sending = true
				p.wg.Add(1)
				go p.send()
			}
		}
	}
	p.mu.Unlock()
	st.cancel()
	_ = st.call.CloseResponse()
	if closed {
		err = ErrClosed
	}
	for _, it := range left {
		it.fut.finish("", 0, fmt.Errorf("client: publish: %w (the message may or may not have been committed)", err))
	}
}

// close fails what is queued, ends the stream and waits for the goroutines.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	queued := p.queue
	p.queue = nil
	st := p.stream
	p.mu.Unlock()
	for _, it := range queued {
		it.fut.finish("", 0, ErrClosed)
	}
	if st != nil {
		st.cancel()
		_ = st.call.CloseResponse()
	}
	p.wg.Wait()
}

// drain waits until every publish submitted so far has its answer (or ctx ends).
func (p *publisher) drain(ctx context.Context) error {
	p.mu.Lock()
	var waits []chan struct{}
	for _, it := range p.queue {
		waits = append(waits, it.fut.done)
	}
	if st := p.stream; st != nil {
		for _, it := range st.inflight {
			waits = append(waits, it.fut.done)
		}
	}
	p.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
