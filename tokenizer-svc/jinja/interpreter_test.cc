// One case per Jinja construct, filter, test and method: each expected output (or
// error message) was produced by Python jinja2 3.1 configured as Hugging Face
// transformers configures it (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False),
// raise_exception, {% generation %}). Errors: ours must be INVALID_ARGUMENT with reason
// template_render_failed, "line N: ...", and carry Python's message where it is given
// (syntax errors word theirs differently).
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/jinja/runtime/interpreter.h"

namespace gantry::jinja {
namespace {

struct Case {
  const char* name;
  const char* tpl;
  const char* context;  // JSON object
  bool ok;
  const char* expected;  // output, or Python's error message ("" when worded differently)
};

const Case kCases[] = {
    {"text_only", R"J(hello)J", R"J({})J", true, R"J(hello)J"},
    {"trailing_newline_dropped", R"J(a
)J", R"J({})J", true, R"J(a)J"},
    {"crlf_normalized", R"J(a
b
c)J", R"J({})J", true, R"J(a
b
c)J"},
    {"print_int_float_none_bool", R"J({{ 1 }} {{ 1.0 }} {{ 2.50 }} {{ none }} {{ true }} {{ 1e3 }} {{ 1_000 }})J", R"J({})J", true, R"J(1 1.0 2.5 None True 1000.0 1000)J"},
    {"print_containers", R"J({{ [1, 'a', none, 1.5] }} {{ {'k': 'v', 'n': [true]} }} {{ (1,) }} {{ (1, 2) }} {{ () }})J", R"J({})J", true, R"J([1, 'a', None, 1.5] {'k': 'v', 'n': [True]} (1,) (1, 2) ())J"},
    {"repr_quotes", R"J({{ ["it's", 'say "hi"', 'both \' "', 'tab\tnl\n'] }})J", R"J({})J", true, R"J(["it's", 'say "hi"', 'both \' "', 'tab\tnl\n'])J"},
    {"string_escapes", R"J({{ 'a\nb\tc\\d\'e\x41\u00e9' }})J", R"J({})J", true, R"J(a
b	c\d'eAé)J"},
    {"undefined_prints_empty", R"J([{{ missing }}])J", R"J({})J", true, R"J([])J"},
    {"arith", R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }})J", R"J({})J", true, R"J(3 -4 2 -2 3.5 2.0 1024 0.5 64 3.0 0.5)J"},
    {"precedence", R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ not 1 == 2 }})J", R"J({})J", true, R"J(7 9 4 True)J"},
    {"concat_tilde", R"J({{ 'a' ~ 1 ~ none ~ missing ~ [1] }})J", R"J({})J", true, R"J(a1None[1])J"},
    {"string_mul", R"J({{ 'ab' * 3 }}{{ [1] * 2 }}{{ 2 * 'x' }})J", R"J({})J", true, R"J(ababab[1, 1]xx)J"},
    {"percent_format", R"J({{ '%s-%d-%05.2f-%r' % ('a', 3, 2.5, 'q') }} {{ '%s' % 'x' }} {{ '%(a)s' % {'a': 1} }})J", R"J({})J", true, R"J(a-3-02.50-'q' x 1)J"},
    {"compare_chain", R"J({{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'a' }})J", R"J({})J", true, R"J(True False True True True True False)J"},
    {"in_not_in", R"J({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }})J", R"J({})J", true, R"J(True True True True True)J"},
    {"and_or_values", R"J({{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 1 }} {{ none or none }})J", R"J({})J", true, R"J(x y  None)J"},
    {"inline_if", R"J({{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if 0 else 2 if 0 else 3 }})J", R"J({})J", true, R"J(y n [] 3)J"},
    {"if_elif_else", R"J({% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}other{% endif %} {% endfor %})J", R"J({})J", true, R"J(one two three other )J"},
    {"for_loop_vars", R"J({% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %})J", R"J({})J", true, R"J(1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|)J"},
    {"for_prev_next", R"J({% for x in [1, 2, 3] %}({{ loop.previtem }},{{ loop.nextitem }}){% endfor %})J", R"J({})J", true, R"J((,2)(1,3)(2,))J"},
    {"for_else", R"J({% for x in [] %}x{% else %}empty{% endfor %})J", R"J({})J", true, R"J(empty)J"},
    {"for_filter", R"J({% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %})J", R"J({})J", true, R"J(15 35 55 75 95 )J"},
    {"for_unpack_items", R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %})J", R"J({"d": {"b": 1, "a": 2}})J", true, R"J(b=1;a=2;ba)J"},
    {"for_dict_keys", R"J({% for k in d %}{{ k }}{% endfor %})J", R"J({"d": {"b": 1, "a": 2}})J", true, R"J(ba)J"},
    {"loop_cycle", R"J({% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %})J", R"J({})J", true, R"J(abca)J"},
    {"break_continue", R"J({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %})J", R"J({})J", true, R"J(0134)J"},
    {"nested_loops", R"J({% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %})J", R"J({})J", true, R"J(1x1 1y2 1|2x1 2y2 2|)J"},
    {"set_scoping", R"J({% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i + 10 %}{{ x }} {% endfor %}{{ x }})J", R"J({})J", true, R"J(010 011 012 0)J"},
    {"namespace", R"J({% set ns = namespace(count=0, found=false) %}{% for i in range(3) %}{% set ns.count = ns.count + i %}{% endfor %}{{ ns.count }} {{ ns.found }})J", R"J({})J", true, R"J(3 False)J"},
    {"set_tuple", R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }})J", R"J({})J", true, R"J(1234)J"},
    {"block_set", R"J({% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper %}shout{% endset %}{{ y }})J", R"J({})J", true, R"J([inner 2]SHOUT)J"},
    {"macro_basic", R"J({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }})J", R"J({})J", true, R"J(Hi A! Hi B? Hi C.)J"},
    {"macro_sees_globals", R"J({% macro m() %}{{ g }}{{ later }}{% endmacro %}{% set later = 5 %}{{ m() }})J", R"J({"g": "G"})J", true, R"J(G5)J"},
    {"macro_varargs", R"J({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }})J", R"J({})J", true, R"J(1(2, 3){'k': 4})J"},
    {"macro_recursion", R"J({% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }})J", R"J({})J", true, R"J(4321)J"},
    {"filter_block", R"J({% filter upper %}abc {{ 'd' }}{% endfilter %})J", R"J({})J", true, R"J(ABC D)J"},
    {"with_block", R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])J", R"J({})J", true, R"J(3[])J"},
    {"comments", R"J(a{# comment #}b{#- trimmed -#}   c)J", R"J({})J", true, R"J(abc)J"},
    {"raw_block", R"J({% raw %}{{ not rendered }}{% endraw %})J", R"J({})J", true, R"J({{ not rendered }})J"},
    {"whitespace_control", R"J(a  {{- 'b' -}}  c
  {%- if true -%}  d  {%- endif -%}
 e)J", R"J({})J", true, R"J(abcde)J"},
    {"trim_lstrip_blocks", R"J(<ul>
  {% for x in [1, 2] %}
    <li>{{ x }}</li>
  {% endfor %}
</ul>
)J", R"J({})J", true, R"J(<ul>
    <li>1</li>
    <li>2</li>
</ul>)J"},
    {"lstrip_not_for_vars", R"J(  {{ 1 }}
  {# c #}
end)J", R"J({})J", true, R"J(  1
end)J"},
    {"plus_disables", R"J(  {%+ if true %}x{% endif +%}
y)J", R"J({})J", true, R"J(  x
y)J"},
    {"slicing", R"J({{ [1, 2, 3, 4][::-1] }} {{ [1, 2, 3, 4][1:3] }} {{ 'héllo'[1:] }} {{ 'abc'[-1] }} {{ [1, 2, 3][::2] }} {{ 'abcdef'[-2:] }} {{ [1,2,3][5:] }})J", R"J({})J", true, R"J([4, 3, 2, 1] [2, 3] éllo c [1, 3] ef [])J"},
    {"attr_and_item", R"J({{ d.a }} {{ d['a'] }} {{ d.items()|list }} {{ l[0] }} {{ l.0 }} {{ d.missing is defined }} [{{ l[9] }}])J", R"J({"d": {"a": 1}, "l": [7]})J", true, R"J(1 1 [('a', 1)] 7 7 False [])J"},
    {"dict_key_shadows_method_by_item", R"J({{ d['items'] }} {{ d.get('items') }})J", R"J({"d": {"items": "I"}})J", true, R"J(I I)J"},
    {"tests_types", R"J({{ 'a' is string }} {{ 1 is number }} {{ 1.0 is float }} {{ 1 is integer }} {{ true is boolean }} {{ d is mapping }} {{ l is sequence }} {{ l is iterable }} {{ none is none }} {{ x is undefined }} {{ x is defined }} {{ 1 is not none }})J", R"J({"d": {}, "l": []})J", true, R"J(True True True True True True True True True True False True)J"},
    {"tests_values", R"J({{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 2 is in [1, 2] }} {{ 2 is eq 2 }} {{ 2 is equalto 3 }} {{ true is true }} {{ false is false }} {{ 0 is false }} {{ 'ab' is lower }} {{ 2 is gt 1 }} {{ 1 is le 1 }})J", R"J({})J", true, R"J(True True True False True True False True True False True True True)J"},
    {"filters_strings", R"J({{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'aBc'|upper }}|{{ 'aBc'|lower }}|{{ 'hello world'|capitalize }}|{{ 'hello wORLD-foo(bar'|title }}|{{ 'abca'|replace('a', 'X') }}|{{ 'abca'|replace('a', 'X', 1) }})J", R"J({})J", true, R"J(x|hi|ABC|abc|Hello world|Hello World-Foo(Bar|XbcX|Xbca)J"},
    {"filters_length_first_last", R"J({{ [1, 2]|length }} {{ 'héllo'|length }} {{ d|count }} {{ [3, 4]|first }} {{ [3, 4]|last }} {{ 'abc'|first }} {{ 'abc'|list }} {{ d|list }})J", R"J({"d": {"a": 1, "b": 2}})J", true, R"J(2 5 2 3 4 a ['a', 'b', 'c'] ['a', 'b'])J"},
    {"filters_join_map", R"J({{ [1, 2, 3]|join(', ') }} {{ users|map(attribute='name')|join('/') }} {{ ['a', 'b']|map('upper')|list }} {{ users|join(',', attribute='name') }})J", R"J({"users": [{"name": "x"}, {"name": "y"}]})J", true, R"J(1, 2, 3 x/y ['A', 'B'] x,y)J"},
    {"filters_select", R"J({{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '']|select|list }} {{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'y')|list|length }})J", R"J({"users": [{"name": "x", "admin": true}, {"name": "y", "admin": false}]})J", true, R"J([1, 3] [2, 4] [1] ['x'] ['y'] 1)J"},
    {"filters_default", R"J({{ missing|default('d') }} {{ missing|d('d2') }} {{ ''|default('e') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ 0|default(5, boolean=true) }})J", R"J({})J", true, R"J(d d2  e None 5)J"},
    {"filters_numbers", R"J({{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 3|float }} {{ 'a'|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.1|round(0, 'ceil') }} {{ [1, 2, 3]|sum }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }})J", R"J({})J", true, R"J(42 4 0 7 3 2.5 3.0 0.0 3 2.57 2.0 4.0 3.0 6 3 1)J"},
    {"filters_string_conv", R"J({{ 1|string }} {{ [1]|string }} {{ none|string }} {{ 1.0|string ~ 'x' }})J", R"J({})J", true, R"J(1 [1] None 1.0x)J"},
    {"filters_tojson", R"J({{ d|tojson }} {{ d|tojson(indent=2) }} {{ 'é<>&\''|tojson }} {{ [1.0, 2, none, true]|tojson }} {{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }})J", R"J({"d": {"b": 1.0, "a": [1, {"x": "y"}], "c": "ü"}})J", true, R"J({"b": 1.0, "a": [1, {"x": "y"}], "c": "ü"} {
  "b": 1.0,
  "a": [
    1,
    {
      "x": "y"
    }
  ],
  "c": "ü"
} "é<>&'" [1.0, 2, null, true] {"a": [1, {"x": "y"}], "b": 1.0, "c": "ü"} {"b":1.0,"a":[1,{"x":"y"}],"c":"ü"})J"},
    {"filters_escape_safe", R"J({{ '<a href="x">&\'</a>'|e }} {{ '<b>'|escape }} {{ '<b>'|safe }})J", R"J({})J", true, R"J(&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; &lt;b&gt; <b>)J"},
    {"filters_items_dictsort", R"J({{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(by='value', reverse=true) }})J", R"J({"d": {"b": 1, "A": 3, "c": 2}})J", true, R"J([('b', 1), ('A', 3), ('c', 2)] [('A', 3), ('b', 1), ('c', 2)] [('A', 3), ('c', 2), ('b', 1)])J"},
    {"filters_sort_unique_reverse", R"J({{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='n')|join }} {{ ['a', 'A', 'b', 'a']|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }})J", R"J({"users": [{"n": "x", "age": 3}, {"n": "y", "age": 1}]})J", true, R"J(['A', 'b', 'c'] ['A', 'b', 'c'] [3, 2, 1] yx ['a', 'b'] [3, 2, 1] cba)J"},
    {"filters_indent_center", R"J({{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'ab'|center(6) }}|)J", R"J({})J", true, R"J(a
  b

  c|  a
  b|  ab  |)J"},
    {"filters_misc", R"J({{ 'a b  c'|wordcount }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ '%s+%s'|format(1, 2) }} {{ d|attr('a') }})J", R"J({"d": {"a": 1}})J", true, R"J(3 [[1, 2], [3, 4], [5]] 1+2 )J"},
    {"str_methods", R"J({{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '..x..'.strip('.') }} {{ '\n x\n'.lstrip() }}|{{ 'x \n'.rstrip() }}|)J", R"J({})J", true, R"J(True True ['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] x x
|x|)J"},
    {"str_methods_2", R"J({{ 'Hello World'.lower() }} {{ 'hi there'.upper() }} {{ "they're bill's".title() }} {{ 'abc'.replace('b', 'B') }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'a-b'.count('-') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {name}'.format(1, name='n') }} {{ '{0:>4}|{1:.2f}'.format('a', 3.14159) }} {{ 'ab'.center(5, '*') }} {{ '7'.zfill(3) }} {{ 'a\nb'.splitlines() }} {{ '12'.isdigit() }})J", R"J({})J", true, R"J(hello world HI THERE They'Re Bill'S aBc 2 -1 1 a-b 1 and n    a|3.14 **ab* 007 ['a', 'b'] True)J"},
    {"dict_methods", R"J({{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }})J", R"J({"d": {"a": 1, "b": [2]}})J", true, R"J(1 None dflt ['a', 'b'] [1, [2]] [('a', 1), ('b', [2])])J"},
    {"list_methods", R"J({{ [1, 2, 2].count(2) }} {{ ['a', 'b'].index('b') }})J", R"J({})J", true, R"J(2 1)J"},
    {"range_builtin", R"J({{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }})J", R"J({})J", true, R"J([0, 1, 2] [1, 3, 5] [5, 3, 1])J"},
    {"dict_builtin", R"J({{ dict(a=1, b='x') }} {{ namespace(a=1).a }})J", R"J({})J", true, R"J({'a': 1, 'b': 'x'} 1)J"},
    {"json_kinds_kept", R"J({{ m.f }} {{ m.i }} {{ m.f|tojson }} {{ m.i + 1 }} {{ m.f + 1 }} {{ m }})J", R"J({"m": {"f": 1.0, "i": 1}})J", true, R"J(1.0 1 1.0 2 2.0 {'f': 1.0, 'i': 1})J"},
    {"unicode_case", R"J({{ 'ÉCOLE ÄÖÜ'|lower }} {{ 'straße café'|upper }} {{ 'привет мир'|title }})J", R"J({})J", true, R"J(école äöü STRASSE CAFÉ Привет Мир)J"},
    {"reversed_messages", R"J({% for m in messages[::-1] %}{{ m.role }}{{ loop.index0 }}{% endfor %})J", R"J({"messages": [{"role": "a"}, {"role": "b"}, {"role": "c"}]})J", true, R"J(c0b1a2)J"},
    {"generation_tag", R"J({% generation %}gen {{ 1 }}{% endgeneration %})J", R"J({})J", true, R"J(gen 1)J"},
    {"is_not_and_not_in", R"J({{ x is not defined }} {{ 1 is not string }} {{ 'a' not in ['b'] }})J", R"J({})J", true, R"J(True True True)J"},
    {"none_attr_is_undefined", R"J([{{ none.x }}] {{ none.x is defined }})J", R"J({})J", true, R"J([] False)J"},
    {"err_raise_exception", R"J(line1
{{ raise_exception('custom failure') }})J", R"J({})J", false, R"J(custom failure)J"},
    {"err_undefined_attr", R"J({{ missing.attr }})J", R"J({})J", false, R"J('missing' is undefined)J"},
    {"err_str_plus_none", R"J({{ 'a' + none }})J", R"J({})J", false, R"J(can only concatenate str (not "NoneType") to str)J"},
    {"err_in_none", R"J({{ 'a' in none }})J", R"J({})J", false, R"J(argument of type 'NoneType' is not iterable)J"},
    {"err_list_append", R"J({% set l = [1] %}{{ l.append(2) }})J", R"J({})J", false, R"J(access to attribute 'append' of 'list' object is unsafe.)J"},
    {"err_unknown_filter", R"J({% if false %}{{ 1|nosuchfilter }}{% endif %})J", R"J({})J", true, R"J()J"},
    {"err_syntax", R"J({% if %}x{% endif %})J", R"J({})J", false, R"J()J"},
    {"err_unclosed_block", R"J({% for x in y %}x)J", R"J({})J", false, R"J()J"},
    {"err_division_by_zero", R"J({{ 1 // 0 }})J", R"J({})J", false, R"J(integer division or modulo by zero)J"},
    {"err_call_undefined", R"J({{ nosuchfunc() }})J", R"J({})J", false, R"J('nosuchfunc' is undefined)J"},
    {"err_range_too_big", R"J({{ range(1000000)|length }})J", R"J({})J", false, R"J(Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).)J"},
    {"err_macro_too_many_args", R"J({% macro m(a) %}{% endmacro %}{{ m(1, 2) }})J", R"J({})J", false, R"J(macro 'm' takes not more than 1 argument(s))J"},
    {"err_unpack", R"J({% set a, b = [1] %})J", R"J({})J", false, R"J(not enough values to unpack (expected 2, got 1))J"},
    {"err_compare_types", R"J({{ 1 < 'a' }})J", R"J({})J", false, R"J('<' not supported between instances of 'int' and 'str')J"},
    {"err_ns_non_namespace", R"J({% set d = {} %}{% set d.x = 1 %})J", R"J({})J", false, R"J(cannot assign attribute on non-namespace object)J"},
    {"err_break_outside_loop", R"J({% break %})J", R"J({})J", false, R"J()J"},
    {"err_unknown_tag", R"J({% include 'x' %})J", R"J({})J", false, R"J()J"},
    {"err_tojson_undefined", R"J({{ missing|tojson }})J", R"J({})J", false, R"J(Object of type Undefined is not JSON serializable)J"},
};

class InterpreterCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(InterpreterCaseTest, MatchesPythonJinja2) {
  const Case& c = GetParam();
  absl::StatusOr<json::Value> ctx_json = json::Parse(c.context);
  ASSERT_TRUE(ctx_json.ok());
  DictData ctx;
  for (const auto& m : ctx_json->members()) ctx.Set(m.first, FromJson(m.second));
  absl::StatusOr<std::string> out;
  absl::StatusOr<std::shared_ptr<const Template>> tpl = Template::Parse(c.tpl);
  if (tpl.ok()) {
    out = (*tpl)->Render(ctx);
  } else {
    out = tpl.status();
  }
  if (c.ok) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, c.expected);
    return;
  }
  ASSERT_FALSE(out.ok()) << "rendered: " << *out;
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(out.status()), "template_render_failed");
  std::string message(out.status().message());
  EXPECT_EQ(message.rfind("line ", 0), 0u) << message;
  EXPECT_NE(message.find(c.expected), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Constructs, InterpreterCaseTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(InterpreterTest, RaiseExceptionNamesTheTemplateLine) {
  auto tpl = Template::Parse("a\n\n{{ raise_exception('boom') }}");
  ASSERT_TRUE(tpl.ok());
  absl::StatusOr<std::string> out = (*tpl)->Render({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "line 3: boom");
}

TEST(InterpreterTest, SyntaxErrorNamesTheTemplateLine) {
  auto tpl = Template::Parse("ok\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(tpl.ok());
  EXPECT_EQ(std::string(tpl.status().message()).rfind("line 3: ", 0), 0u) << tpl.status();
}

TEST(InterpreterTest, StrftimeNowUsesTheInjectedClock) {
  auto tpl = Template::Parse("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(tpl.ok());
  RenderOptions options;
  options.now_for_test = 86400 * 366;  // 1971-01-02
  absl::StatusOr<std::string> out = (*tpl)->Render({}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "1971");
}

// A tojson memo answers only `x | tojson` without arguments, and only for the value it
// was made for (by identity: an equal value elsewhere is dumped as usual).
TEST(InterpreterTest, ToJsonMemoAnswersOnlyItsValueWithoutArguments) {
  auto tpl = Template::Parse("{{ x | tojson }}|{{ x | tojson(indent=1) }}|{{ y | tojson }}|{{ x.a | tojson }}");
  ASSERT_TRUE(tpl.ok()) << tpl.status();
  auto parsed = json::Parse(R"({"a": [1, 2]})");
  ASSERT_TRUE(parsed.ok());
  Value x = FromJson(*parsed);
  Value y = FromJson(*parsed);
  ToJsonMemo memo{{x.identity(), "MEMO"}};
  RenderOptions options;
  options.tojson_memo = &memo;
  DictData context;
  context.Set("x", x);
  context.Set("y", y);
  absl::StatusOr<std::string> out = (*tpl)->Render(context, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "MEMO|{\n \"a\": [\n  1,\n  2\n ]\n}|{\"a\": [1, 2]}|[1, 2]");
  // Without the memo, the filter's own text.
  out = (*tpl)->Render(context);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->substr(0, out->find('|')), "{\"a\": [1, 2]}");
}

TEST(InterpreterTest, LimitsStopRunawayTemplates) {
  struct {
    const char* tpl;
    const char* what;
  } cases[] = {
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps"},
      {"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
       "string"},
      {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nested"},
      {"{{ 'x' * 100000000000 }}", "string"},
      {"{{ 2 ** 100 }}", "overflow"},
      {"{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       "list"},
      {"{% set ns = namespace(l=[]) %}{% for i in range(500) %}{% set ns.l = [ns.l] %}{% endfor %}",
       "nested"},
      {"{% set ns = namespace() %}{% set ns.me = ns %}", "namespace"},
  };
  RenderOptions options;
  options.max_steps = 2'000'000;
  for (const auto& c : cases) {
    auto tpl = Template::Parse(c.tpl);
    ASSERT_TRUE(tpl.ok()) << c.tpl << ": " << tpl.status();
    absl::StatusOr<std::string> out = (*tpl)->Render({}, options);
    ASSERT_FALSE(out.ok()) << c.tpl;
    EXPECT_EQ(ReasonOf(out.status()), "template_render_failed") << c.tpl;
    EXPECT_NE(std::string(out.status().message()).find(c.what), std::string::npos) << out.status();
  }
}

TEST(InterpreterTest, DeepSyntaxIsAnErrorNotACrash) {
  std::string deep(100000, '(');
  EXPECT_FALSE(Template::Parse("{{ " + deep + " }}").ok());
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_FALSE(Template::Parse(chain + " }}").ok());
  std::string blocks;
  for (int i = 0; i < 10000; ++i) blocks += "{% if 1 %}";
  EXPECT_FALSE(Template::Parse(blocks).ok());
  std::string elifs = "{% if 0 %}";
  for (int i = 0; i < 10000; ++i) elifs += "{% elif 0 %}";
  EXPECT_FALSE(Template::Parse(elifs + "{% endif %}").ok());
}

}  // namespace
}  // namespace gantry::jinja
