package tracing

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/edgeq/edgeq/internal/store/luascript"
)

// RedisHook traces store calls made within a recorded span: one client span per command or
// pipeline, named by the command (EVALSHA and EVAL by the script's file name). A call outside any
// recorded span (background work, a request not sampled) is not traced and costs one check. Keys and
// arguments are never recorded: they hold pseudonyms, request ids and amounts.
func RedisHook(tracer trace.Tracer) redis.Hook { return redisHook{tracer: tracer} }

type redisHook struct{ tracer trace.Tracer }

// Script is the attribute naming the Lua script of an EVALSHA or EVAL.
const Script = attribute.Key("edgeq.redis.script")

var redisSystem = semconv.DBSystemNameRedis

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !traced(ctx) {
			return next(ctx, cmd)
		}
		op, script := operation(cmd)
		name := op
		attrs := []attribute.KeyValue{redisSystem, semconv.DBOperationName(op)}
		if script != "" {
			name += " " + script
			attrs = append(attrs, Script.String(script))
		}
		ctx, span := h.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		err := next(context.WithValue(ctx, inStoreCall{}, true), cmd)
		end(span, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !traced(ctx) {
			return next(ctx, cmds)
		}
		// The pipeline's commands in order, a few at most: "EVALSHA reserve.lua WAIT".
		var names []string
		for i, cmd := range cmds {
			if i == maxNamed {
				names = append(names, "...")
				break
			}
			op, script := operation(cmd)
			if script != "" {
				op += " " + script
			}
			if len(names) == 0 || names[len(names)-1] != op {
				names = append(names, op)
			}
		}
		ctx, span := h.tracer.Start(ctx, "pipeline", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			redisSystem, semconv.DBOperationName("PIPELINE"), semconv.DBOperationBatchSize(len(cmds)),
			attribute.String("edgeq.redis.commands", strings.Join(names, ", "))))
		err := next(context.WithValue(ctx, inStoreCall{}, true), cmds)
		end(span, err)
		return err
	}
}

// inStoreCall marks the context of a traced store call: the commands go-redis makes within it (the
// handshake of a new connection: HELLO, CLIENT SETINFO) are part of that call, not spans of their own.
type inStoreCall struct{}

// traced says whether a store call with ctx gets a span: within a recorded span, and not within
// another store call.
func traced(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).IsRecording() && ctx.Value(inStoreCall{}) == nil
}

// maxNamed bounds the commands a pipeline's span names.
const maxNamed = 8

// operation is a command's name in upper case, and for a script call the script's file name.
func operation(cmd redis.Cmder) (op, script string) {
	op = strings.ToUpper(cmd.Name())
	args := cmd.Args()
	if len(args) > 1 {
		switch op {
		case "EVALSHA", "EVALSHA_RO":
			if sha, ok := args[1].(string); ok {
				script = luascript.Name(sha)
			}
		case "EVAL", "EVAL_RO":
			if src, ok := args[1].(string); ok {
				script = luascript.Name(hashOf(src))
			}
		}
	}
	return op, script
}

// end ends a store call's span: an error by its kind only (a script's error text may quote keys).
func end(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		kind := "redis"
		var netErr net.Error
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
			kind = "timeout"
		case strings.HasPrefix(err.Error(), "NOSCRIPT"):
			// Not a failure: the first call of a script on a server that has not seen it yet, sent
			// again at once with EVAL.
			span.SetAttributes(semconv.ErrorTypeKey.String("noscript"))
			span.End()
			return
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}

// hashOf is a script's SHA1 as go-redis computes it (redis.NewScript).
func hashOf(src string) string { return redis.NewScript(src).Hash() }
