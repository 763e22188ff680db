//! The YAML side: the file's one document with a position on every node, and what a node
//! holds, seen as ratelimit's Go loader (yaml.v2) sees it.

use saphyr::{AnnotatedMapping, MarkedYaml, ScalarStyle, YamlData, YamlLoader};
use saphyr_parser::{Event, Parser};

use super::error::At;

/// A node of the file, with its position.
pub(crate) type Node<'t> = MarkedYaml<'t>;

/// The deepest nesting of YAML collections read. A ratelimit configuration is at most 32
/// descriptors deep (two levels each: a list and a mapping), and the loader builds nested
/// collections by recursion, one stack frame set a level: a file a few thousand levels deep
/// (`- - - - ...` on one line is two bytes a level) would overflow the stack, not be refused.
const MAX_YAML_DEPTH: usize = 200;

/// Where `text` nests collections more than [`MAX_YAML_DEPTH`] deep, read event by event (the
/// parser keeps its own stack; only the loader recurses). A syntax error is left to the loader.
fn too_deep(text: &str) -> Option<At> {
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0_usize;
    while let Some(Ok((event, span))) = parser.next_event() {
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Some(position(span.start.line(), span.start.col()));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd => break,
            _ => {}
        }
    }
    None
}

/// The file's document (`None` for a file with none), or where and why it cannot be read.
pub(crate) fn document(text: &str) -> Result<Option<Node<'_>>, (At, String)> {
    if let Some(at) = too_deep(text) {
        return Err((
            at,
            format!(
                "the YAML is nested more than {MAX_YAML_DEPTH} deep here; a ratelimit configuration is at most 32 descriptors deep: flatten it"
            ),
        ));
    }
    let mut loader = YamlLoader::default();
    // Scalars stay as written: a `value: 1.10` is the text "1.10", as ratelimit reads it.
    loader.early_parse(false);
    let loaded = Parser::new_from_str(text).load(&mut loader, true);
    if let Some(error) = loaded.err().as_ref().or(loader.error()) {
        let marker = error.marker();
        let at = position(marker.line(), marker.col());
        return Err((at, syntax_message(error.info())));
    }
    let mut documents = loader.into_documents().into_iter();
    let first = documents.next();
    // A stray `---` at the end makes an empty document; only one with content is refused.
    if let Some(second) = documents.find(|document| !matches!(shape(document), Shape::Absent)) {
        return Err((
            at(&second),
            "a second YAML document starts here, and ratelimit reads one document per file: \
             put it in a file of its own and migrate each file"
                .to_owned(),
        ));
    }
    Ok(first)
}

/// The sentence for a YAML syntax error.
fn syntax_message(info: &str) -> String {
    if info == "duplicated key in mapping" {
        return "this field is given twice in the same mapping, which YAML forbids: keep one"
            .to_owned();
    }
    format!("the YAML cannot be read ({info}); ratelimit would not load it either: fix the syntax")
}

/// Where `node` starts.
pub(crate) fn at(node: &Node<'_>) -> At {
    position(node.span.start.line(), node.span.start.col())
}

/// The parser's line (1-based) and column (0-based), as 1-based both (a made-up node has 0).
fn position(line: usize, column: usize) -> At {
    At {
        line: line.max(1),
        column: column.saturating_add(1),
    }
}

/// What a node holds.
pub(crate) enum Shape<'n, 't> {
    /// Nothing (`~`, `null`, or no value at all): ratelimit takes it as the field left out.
    Absent,
    /// A scalar, as written; `plain` when unquoted (only those are numbers or booleans).
    Scalar { text: &'n str, plain: bool },
    /// A mapping, in file order.
    Mapping(&'n AnnotatedMapping<'t, Node<'t>>),
    /// A list.
    List(&'n [Node<'t>]),
    /// Anything else: a value with an explicit tag, or one the loader could not make out.
    Other(String),
}

/// What `node` holds.
pub(crate) fn shape<'n, 't>(node: &'n Node<'t>) -> Shape<'n, 't> {
    match &node.data {
        YamlData::Representation(text, style, None) => {
            let plain = *style == ScalarStyle::Plain;
            if plain && matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL") {
                Shape::Absent
            } else {
                Shape::Scalar { text, plain }
            }
        }
        YamlData::Representation(_, _, Some(tag)) | YamlData::Tagged(tag, _) => {
            let tag = if tag.is_yaml_core_schema() {
                format!("!!{}", tag.suffix)
            } else {
                tag.to_string()
            };
            Shape::Other(format!(
                "a value tagged `{tag}` (tags are not read: write the value alone)"
            ))
        }
        YamlData::Mapping(mapping) => Shape::Mapping(mapping),
        YamlData::Sequence(items) => Shape::List(items),
        // The loader's stand-in for an empty document (`---` alone).
        YamlData::BadValue => Shape::Absent,
        // Neither is made when loading with scalars as written and aliases resolved.
        YamlData::Value(_) | YamlData::Alias(_) => {
            Shape::Other("a value that cannot be read".to_owned())
        }
    }
}

/// What kind of value `node` is, for messages ("a list", "the text \"x\"").
pub(crate) fn kind(node: &Node<'_>) -> String {
    match shape(node) {
        Shape::Absent => "nothing".to_owned(),
        Shape::Scalar { text, plain: true } => format!("{text:?}"),
        Shape::Scalar { text, plain: false } => format!("the quoted text {text:?}"),
        Shape::Mapping(_) => "a mapping".to_owned(),
        Shape::List(_) => "a list".to_owned(),
        Shape::Other(other) => other,
    }
}
