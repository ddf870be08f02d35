// A GraphQL shop executed by graphql-js (npm `graphql`, the executor under Apollo Server, GraphQL Yoga,
// Vendure and express-graphql): the referee of edgeq's differential tests. The Go tests start it as
//
//   node graphqljs.mjs --schema FILE --port-file FILE
//
// and send it the same request bytes they give edgeq's reading. It executes the schema in FILE (the
// demo shop's) with resolvers that record every addItemToOrder call, with its arguments as graphql-js
// coerced them, and answers them in the Referee-Calls header (a JSON array of {productVariantId,
// quantity}, base64-encoded) beside an ordinary GraphQL answer.
//
// The request header Referee-Reading picks how the HTTP request is read into GraphQL parameters, as
// each server family does (their source, read for this):
//   graphql-http     (default) POST: application/json only (charset utf-8 or none), the body alone, one
//                    operation; GET: the query string.
//   express-graphql  any method: the URL's parameters first, the body's after (JSON objects, forms,
//                    application/graphql; charsets utf-8 and utf16le; gzip and deflate bodies
//                    inflated); a variables string parsed.
//   apollo           Apollo Server 4 behind the body parsers Vendure installs: POST JSON (charsets
//                    utf-*, gzip and deflate inflated, the last of a key given twice) or a form; batched
//                    arrays; automatic persisted queries (extensions.persistedQuery.sha256Hash); GET:
//                    the query string.
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { gunzipSync, inflateSync } from 'node:zlib';
import { parse as parseQueryString } from 'node:querystring';
import { buildSchema, parse, validate, execute, getOperationAST } from 'graphql';

const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, arg, i, all) => {
  if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
  return pairs;
}, []));
const schema = buildSchema(readFileSync(args.schema, 'utf8'));

// The root resolvers: a shop with no products to read and a cart that takes what it is given.
const order = (quantity) => ({ __typename: 'Order', id: 'cart-1', items: [], count: quantity, total: '0.00' });
const cartResult = (quantity) => {
  if (quantity < 0) return { __typename: 'NegativeQuantityError', errorCode: 'NEGATIVE_QUANTITY_ERROR', message: 'negative' };
  if (quantity > 10) return { __typename: 'OrderLimitError', errorCode: 'ORDER_LIMIT_ERROR', message: 'limit', maxItems: 10 };
  return order(quantity);
};
const rootValue = {
  products: () => [],
  product: () => null,
  cart: () => null,
  activeOrder: () => null,
  addItemToOrder: ({ productVariantId, quantity }, context) => {
    context.calls.push({ productVariantId: String(productVariantId), quantity });
    return cartResult(quantity);
  },
  adjustOrderLine: ({ quantity }) => cartResult(quantity),
};

// Documents an apollo reading has seen sent with their hash.
const persisted = new Map();

class HTTPError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function mediaType(req) {
  const [type, ...params] = (req.headers['content-type'] || '').split(';');
  const charset = params.map((p) => p.trim().split('=')).find(([k]) => k.toLowerCase() === 'charset');
  return { type: type.trim().toLowerCase(), charset: charset ? (charset[1] || '').replace(/"/g, '').toLowerCase() : '' };
}

function inflate(req, raw) {
  const encoding = (req.headers['content-encoding'] || 'identity').toLowerCase();
  if (encoding === 'identity') return raw;
  if (encoding === 'gzip') return gunzipSync(raw);
  if (encoding === 'deflate') return inflateSync(raw);
  throw new HTTPError(415, `unsupported content encoding "${encoding}"`);
}

function searchParams(req) {
  return new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '');
}

function jsonParam(value, name) {
  if (typeof value !== 'string') return value;
  try { return JSON.parse(value); } catch { throw new HTTPError(400, `${name} is invalid JSON`); }
}

// getParams reads the parameters of a GET's query string (graphql-http and Apollo alike).
function getParams(req) {
  const sp = searchParams(req);
  return {
    query: sp.get('query') ?? undefined, operationName: sp.get('operationName') ?? undefined,
    variables: jsonParam(sp.get('variables') ?? undefined, 'variables'),
    extensions: jsonParam(sp.get('extensions') ?? undefined, 'extensions'),
  };
}

// graphqlHTTP reads as graphql-http's parseRequestParams does.
function graphqlHTTP(req, raw) {
  if (req.method === 'GET') {
    const sp = searchParams(req);
    return { items: [getParams(req)] };
  }
  if (req.method !== 'POST') throw new HTTPError(405, 'method not allowed');
  const { type, charset } = mediaType(req);
  if (type !== 'application/json' || (charset && charset !== 'utf-8')) throw new HTTPError(415, 'unsupported media type');
  let data;
  try { data = JSON.parse(raw.toString('utf8')); } catch { throw new HTTPError(400, 'unparsable JSON body'); }
  if (typeof data !== 'object' || data === null) throw new HTTPError(400, 'JSON body must be an object');
  return { items: [{ query: data.query, operationName: data.operationName, variables: data.variables, extensions: data.extensions }] };
}

// expressGraphQL reads as express-graphql's getGraphQLParams and parseBody do.
function expressGraphQL(req, raw) {
  const sp = searchParams(req);
  let body = {};
  const { type, charset } = mediaType(req);
  if (raw.length > 0 && type) {
    const cs = charset || 'utf-8';
    if (!['utf-8', 'utf8', 'utf16le'].includes(cs)) throw new HTTPError(415, `unsupported charset "${cs.toUpperCase()}"`);
    const text = inflate(req, raw).toString(cs === 'utf16le' ? 'utf16le' : 'utf8');
    if (type === 'application/json') {
      if (!/^[ \t\n\r]*\{/.test(text)) throw new HTTPError(400, 'POST body sent invalid JSON.');
      try { body = JSON.parse(text); } catch { throw new HTTPError(400, 'POST body sent invalid JSON.'); }
    } else if (type === 'application/graphql') {
      body = { query: text };
    } else if (type === 'application/x-www-form-urlencoded') {
      body = parseQueryString(text);
    }
  }
  let variables = sp.get('variables') ?? body.variables;
  if (typeof variables === 'string') variables = jsonParam(variables, 'variables');
  else if (typeof variables !== 'object') variables = null;
  const operationName = sp.get('operationName') ?? body.operationName;
  return { items: [{ query: sp.get('query') ?? body.query, operationName: typeof operationName === 'string' ? operationName : null, variables }] };
}

// apollo reads as Apollo Server 4's runHttpQuery does, behind Nest's json and urlencoded parsers.
function apollo(req, raw) {
  if (req.method === 'GET') {
    return { items: [{ ...getParams(req), apq: true }] };
  }
  if (req.method !== 'POST') throw new HTTPError(405, 'method not allowed');
  const { type, charset } = mediaType(req);
  let body;
  if (type === 'application/json') {
    const cs = charset || 'utf-8';
    if (!cs.startsWith('utf-')) throw new HTTPError(415, `unsupported charset "${cs.toUpperCase()}"`);
    const text = inflate(req, raw).toString(cs.startsWith('utf-16') ? 'utf16le' : 'utf8');
    if (!/^[\x20\x09\x0a\x0d]*[[{]/.test(text)) throw new HTTPError(400, 'invalid JSON');
    try { body = JSON.parse(text); } catch { throw new HTTPError(400, 'invalid JSON'); }
  } else if (type === 'application/x-www-form-urlencoded') {
    body = parseQueryString(inflate(req, raw).toString('utf8'));
  } else {
    throw new HTTPError(400, 'POST body missing, invalid Content-Type, or JSON object has no keys.');
  }
  const items = Array.isArray(body) ? body : [body];
  return { batched: Array.isArray(body), items: items.map((item) => {
    if (typeof item !== 'object' || item === null) throw new HTTPError(400, 'batch item is not an object');
    for (const key of ['query', 'operationName']) {
      if (item[key] !== undefined && item[key] !== null && typeof item[key] !== 'string') throw new HTTPError(400, `${key} must be a string`);
    }
    for (const key of ['variables', 'extensions']) {
      if (item[key] !== undefined && item[key] !== null && (typeof item[key] !== 'object' || Array.isArray(item[key]))) {
        throw new HTTPError(400, `${key} must be an object`);
      }
    }
    return { query: item.query ?? undefined, operationName: item.operationName ?? undefined, variables: item.variables, extensions: item.extensions, apq: true };
  }) };
}

const readings = { 'graphql-http': graphqlHTTP, 'express-graphql': expressGraphQL, apollo };

// run executes one operation request; calls collects the addItemToOrder calls.
function run(params, method, calls) {
  let { query } = params;
  const hash = params.apq && params.extensions?.persistedQuery?.sha256Hash;
  if (typeof hash === 'string') {
    if (typeof query === 'string') {
      if (createHash('sha256').update(query).digest('hex') !== hash) return { errors: [{ message: 'provided sha does not match query' }] };
      persisted.set(hash, query);
    } else if (persisted.has(hash)) {
      query = persisted.get(hash);
    } else {
      return { errors: [{ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } }] };
    }
  }
  if (typeof query !== 'string' || query === '') return { errors: [{ message: 'Must provide query string.' }] };
  let document;
  try { document = parse(query); } catch (err) { return { errors: [{ message: err.message }] }; }
  const invalid = validate(schema, document);
  if (invalid.length > 0) return { errors: invalid.map((e) => ({ message: e.message })) };
  const operation = getOperationAST(document, params.operationName);
  if (method === 'GET' && operation?.operation === 'mutation') return { errors: [{ message: 'mutation over GET' }], status: 405 };
  const variables = params.variables === null || params.variables === undefined ? undefined : params.variables;
  const result = execute({ schema, document, rootValue, contextValue: { calls }, variableValues: variables, operationName: params.operationName ?? undefined });
  return { data: result.data, errors: result.errors?.map((e) => ({ message: e.message })) };
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const calls = [];
    let status = 200;
    let answer;
    try {
      const reading = readings[req.headers['referee-reading'] || 'graphql-http'];
      if (!reading) throw new HTTPError(400, 'unknown Referee-Reading');
      const { items, batched } = reading(req, Buffer.concat(chunks));
      const results = items.map((params) => run(params, req.method, calls));
      for (const r of results) {
        if (r.status) status = r.status;
        delete r.status;
      }
      answer = batched ? results : results[0];
    } catch (err) {
      status = err.status || 400;
      answer = { errors: [{ message: err.message }] };
    }
    // Base64: a header carries no more than Latin-1, and product ids are anything.
    res.writeHead(status, { 'Content-Type': 'application/json', 'Referee-Calls': Buffer.from(JSON.stringify(calls)).toString('base64') });
    res.end(JSON.stringify(answer));
  });
});

server.listen(0, '127.0.0.1', () => {
  // Written whole, then renamed: the test reads a complete port or none.
  writeFileSync(args['port-file'] + '.tmp', String(server.address().port));
  renameSync(args['port-file'] + '.tmp', args['port-file']);
});
